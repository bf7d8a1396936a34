"""The baseline for bench/load.py: a Flask endpoint that returns a fixed AdmissionReview."""

from __future__ import annotations

import json

from flask import Flask, Response

app = Flask("bare")
_ANSWER = json.dumps(
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "x", "allowed": True}}
)


@app.post("/mutate")
@app.post("/validate")
def answer() -> Response:
    return Response(_ANSWER, mimetype="application/json")
