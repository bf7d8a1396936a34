"""What tests share, and the only place they share it from: no test module imports another, nor
conftest (tests/deploy/test_house.py holds them to that).

    builders.py        policies, pods and containers from a few words; the patch-checking engine
    cluster.py         webhook replicas against the in-process API server
    kube_fake.py       the in-process API server, for faults a real one cannot show on demand
    server_harness.py  a webhook server in a thread, over real HTTPS
    reviews.py         AdmissionReviews as the API server sends them
    processes.py       server processes: free ports, readiness
    deploy.py          the kubernetes client's models for the deploy manifests
    dra.py             DRA objects: device classes, ResourceSlices, claims
    corpus.py          the public GPU manifests and the example policy sets they are judged under
"""
