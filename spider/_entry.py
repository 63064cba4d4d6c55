"""The console script's entry point: a Ctrl-C while the modules load exits with 130, quietly."""


def main() -> None:
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    run()
