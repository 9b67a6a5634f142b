"""The `covel` command: up, play, demo."""

import os

# gRPC's own log lines stay off a command's terminal (a failed TLS handshake printed four before the command's
# error): the command says in one line what went wrong (covel_cli/refusals.py). A GRPC_VERBOSITY you set wins.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
