"""Where policies come from: the store that keeps each source's last good version and swaps in a
new engine (store.py), policy directories reloaded on change (directories.py), policy ConfigMaps
as sources (configmaps.py), GPUPolicy objects as sources (gpupolicy_objects.py), the bundled
default, files and manifests (policy_files.py).

May import: the engine, metrics and logs. Nothing else of the edge: sources are fed by whoever
watches (cluster, directories) and hand engines to whoever holds them (a callable).
"""
