"""`python -m services.registry`: run the plugin registry."""


from services.registry.server import start
from services.registry.settings import RegistrySettings
from shared.grpc_server import run_service, serve_until_signalled
from shared.logs import configure_logging


async def main() -> None:
    settings = RegistrySettings()
    configure_logging("registry", settings.log_level, settings.log_format)
    running = await start(settings)
    await serve_until_signalled(running, "registry", settings.shutdown_grace_s)


if __name__ == "__main__":
    run_service(main)
