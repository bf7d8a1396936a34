"""The engine: pure, I/O-free decisions about GPU pods. No web framework, server, cluster client,
TLS, OS or clock (CI's import contracts hold it to that); time and quantities come in as arguments.

    engine.py       the front door: one call per admission question (mutate, validate)
    errors.py, request.py, pod.py, containers.py, cluster.py, quantity.py
                    the shared vocabulary: the two error families, the request, the Pod and its
                    containers as read, what may be known of the cluster, Kubernetes quantities
    model/          policies: the GPUPolicy model, its YAML with lines, the loader, CEL, selectors,
                    and the compiled, indexed PolicySet that is swapped whole
    gpu/            NVIDIA's GPUs: the catalog, free capacity, where a pod may land and what it
                    costs there, and MIG planning (which slice a container gets)
    mutate/         what the mutating webhook writes: the copy-on-write draft with its patch, the
                    MIG rewrite, runtime settings, the Triton sidecar
    judge/          what the validating webhook decides: usage, quotas, the ledger, CEL rules,
                    device access, verdicts, pod controllers

Layers, top to bottom (pyproject.toml's import contracts): engine, judge, mutate, gpu.mig, its
gate and choices, the vocabulary (pod, request, cluster), containers, model, gpu.capacity and
placement, gpu.catalog, then gpu.models, gpu.devices, quantity and errors. A layer imports only
the layers below it.
"""
