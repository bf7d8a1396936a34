"""What a review decides once about a pod, before anything is written or judged.

    applicable.py which policies apply to the pod and how (the one set-up of mutate, validate
                  and ephemeral containers), and the MIG plan of the deciding policy
    mig.py        the MIG planner: which slice each whole-GPU container gets, and the pin
    plan.py       the plan it makes: rewrites, problems, warnings, the pin
    backends.py   how each slice reaches its container: device plugin, DRA extended resource, claim
    ladder.py     the claim back-end's firstAvailable ladders and their templates
    published.py  every ladder a policy's pods may be given, for the replicas to publish ahead
    gate.py       one gate for every GPU resource a container names; where a pod must be pinned
    choices.py    what a policy allows a whole-GPU container, from its annotations alone
    sidecar.py    the Triton sidecar as planned: asked for, its settings, its slice, what stops it

Layers, bottom up: choices, gate and ladder; backends; plan; mig; sidecar; applicable beside
published. Above the review (pods, requests) and the policy model; below mutate and judge, which
both start from it and never from each other.
"""
