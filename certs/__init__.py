"""TLS material for the webhook: the pure parts (rotation.py decides the next step, leader.py who
may lead a Lease, material.py maps certificates to Secrets, authority.py makes keys and
certificates) and the thin I/O around them (lease.py holds a Lease, manager.py syncs Secrets,
caBundle and files, files.py writes them locally).

May import: cryptography and the kubernetes client. Never the webhook or the engine.
"""
