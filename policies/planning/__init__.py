"""What a review decides once about a pod, before anything is written or judged.

    applicable.py which policies apply to the pod and how (the one set-up of mutate, validate
                  and ephemeral containers), and the MIG plan of the deciding policy
    mig.py        the MIG plan of a pod: rewrites, problems, the pin
    gate.py       one gate for every GPU resource a container names; where a pod must be pinned
    choices.py    what a policy allows a whole-GPU container, from its annotations alone
    sidecar.py    the Triton sidecar as planned: asked for, its settings, its slice, what stops it

Layers, bottom up: choices, gate and sidecar's Problem type come from mig's level; mig; sidecar;
applicable. Above the review (pods, requests) and the policy model; below mutate and judge, which
both start from it and never from each other.
"""
