"""HTTP: the review endpoints as a plain WSGI callable (review_endpoints.py) in front of the Flask
app factory and its thin views (app.py), the AdmissionReview wire format (review.py), which
engine call a review needs (admission.py), the one place errors become HTTP (http_errors.py),
gunicorn's settings, worker and logs (gunicorn_conf.py, worker.py, deadlines.py,
gunicorn_logs.py, background.py), the API server's reviews read and answered past gunicorn's HTTP
objects on a kept-alive connection (lean_http.py) and TLS (tls.py).

May import: the engine, state (the holder), sources' pure helpers, metrics and logs. Never
cluster: what the server knows of the cluster it asks the holder.
"""
