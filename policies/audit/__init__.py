"""Background audit: GPU pods already running, judged again through the engine's front door
against the policies and nodes of now (judging.py), and the findings as PolicyReports
(policyreport.py). Sits above policies.engine; pure like it (the edge lists and writes)."""
