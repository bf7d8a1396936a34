"""Serving: the webhook over real TLS as the API server calls it, gunicorn as shipped, replicas, bad traffic."""
