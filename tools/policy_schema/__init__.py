"""What is generated from the engine's model and never run by it: the GPUPolicy JSON Schema
(schema.py, from one builder per spec section in fields.py) and its field reference (docs.py).
They read policies.model; the engine never imports them, so they are not part of the engine the
image compiles. (The webhook configurations' scope, its matchConditions over each workload kind's
templates among it, is the product's: policies.native.webhook_scope, which the offline CLI reads.)"""
