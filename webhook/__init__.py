"""The edge: everything that does I/O around the engine (policies/).

    serving/    HTTP: the Flask app, the AdmissionReview wire format, the one place errors
                become HTTP, gunicorn's configuration and worker, TLS
    cluster/    the Kubernetes API by concern: watches, quota (usage, reservations, strict
                Leases and shares), the background audit, writing as this replica; the
                replica's view of the cluster
    sources/    where policies come from: the store of last good versions, directories,
                ConfigMaps, the bundled default and files
    cli/        the commands (`gpu-admission ...`), offline validate and lint
    state.py    the holder: the engine in force and the replica's view; the only place serving
                reaches the cluster through
    replica.py  one replica wired together (sources, view, certificates, server)
    wsgi.py     the WSGI entry point a container's gunicorn loads
    metrics.py, logs.py
                shared by every part of the edge
    service.py  the Service protocol every background part keeps, and the one periodic Loop

Layers, top to bottom (pyproject.toml's import contracts): cli, wsgi, replica, serving, state,
cluster, sources, then metrics, logs and service; serving and cluster never import each other
directly, and the engine is reached through policies/__init__ alone.
"""
