"""What runs where plugin code runs: in a sandbox worker of the hooks service (the operations it serves,
operations.py), or in the service itself with COVEL_SANDBOX_ENABLED=false (in_process.py). It imports nothing of
the host side (services/hooks/*.py); both sides may import services/hooks/common/. The import contracts
`hooks-plugin-side-imports-no-host` and `hooks-plugin-side-protected` check it (docs/architecture.md).
"""
