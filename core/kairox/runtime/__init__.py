"""The runtime below the surfaces: the facade, which builds each profile's sources once
and owns them, the sessions, and what ingests and syncs knowledge bases.
"""
