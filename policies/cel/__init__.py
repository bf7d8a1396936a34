"""The CEL host beneath the engine: Kubernetes' CEL libraries on Google's C++ runtime
(cel-expr-python), semantic versions as those libraries read them, and the compiler's checked
syntax tree of an expression, read from what it serializes. Imports only `policies.quantity`."""
