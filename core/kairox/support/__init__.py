"""Small helpers every layer may use: errors, paths, secrets, retries, terminal output,
optional imports, the model protocol, sync calls over async code.
"""
