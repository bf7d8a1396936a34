"""What is generated from the engine's model and never run by it: the GPUPolicy JSON Schema
(schema.py, from one builder per spec section in fields.py), its field reference (docs.py), and
the webhook configurations' matchConditions over each workload kind's templates
(workload_conditions.py). They read policies.model; the engine never imports them, so they are not
part of the engine the image compiles."""
