"""The plugin host: every hook (:mod:`~kairox.plugin_host.hookspecs`), the typed records
hooks register (:mod:`~kairox.plugin_host.registry`) and the pluggy manager that loads
plugins and calls them (:mod:`~kairox.plugin_host.manager`).
"""
