"""Who may call the services: the client API's bearer token and TLS (mTLS between services)."""
