"""What of a policy set the API server can judge itself, with no call to the webhook.

    validating.py   a policy's CEL rules as ValidatingAdmissionPolicies and bindings, scoped as
                    the webhook is, and what each policy leaves to the webhook
    mig_gate.py     the MIG profiles a container may name, held for the policy that owns the
                    pod's MIG settings
    device_access.py
                    what a pod writes itself to reach devices, refused under the security
                    settings that hold for it (a policy's, or the defaults)
    runtime_map.py  the matching policies' runtime settings, as one MutatingAdmissionPolicy the
                    API server applies before the webhook, for the GPU pods it is sure of
    runtime_cel.py  its CEL: which policy's setting a key takes, JSON patch operations
    objects.py      the objects: a policy scoped as the webhook is (validating or mutating),
                    its binding, their names
    matching.py     a cluster policy's match (namespaces, selectors, condition) as CEL
    reach.py        which pods could reach a GPU, as CEL: the condition the webhook
                    configurations send pods by, and the native policies' scope

A layer of its own at the engine's top (beside audit/): it reads the model, the MIG gate of
planning/, the device-access words of judge/ and the runtime step's names of mutate/, and
nothing in the engine reads it.
"""
