"""The commands (`gpu-admission ...`, `kubectl gpu-admission ...`): main.py parses and dispatches;
one module per command holds its options, body and exit codes (mutate, validate, lint,
policytest for `test`, quota_command for `quota`, audit, serve, completion, certs); parsing.py what their parsers
share; offline.py judging files without a cluster, inputs.py reading the documents people have.
Sits on top of everything: it may import any part of the edge."""
