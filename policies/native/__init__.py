"""What of a policy set the API server can judge itself, with no call to the webhook.

    validating.py   a policy's CEL rules as ValidatingAdmissionPolicies and bindings, scoped as
                    the webhook is, and what each policy leaves to the webhook
    reach.py        which pods could reach a GPU, as CEL: the condition the webhook
                    configurations send pods by, and the native policies' scope

A layer of its own at the engine's top (beside audit/): it reads the model, and nothing in the
engine reads it.
"""
