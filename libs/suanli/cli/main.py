"""Entry point of the `suanli` console script: one typer app, sub-commands registered by each area."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="suanli",
    help="Suanli (算力): compute-power scheduling for multi-region GPU clusters.",
    no_args_is_help=True,
    add_completion=False,
)


def _register() -> None:
    # Imported here so that `suanli --help` stays one module deep until a command is chosen.
    from suanli.cli import agent, bill, dev, job, nodes, queues, serve, simulate, up

    app.command("up")(up.up)
    app.add_typer(job.app, name="job")
    app.command("nodes")(nodes.nodes)
    app.command("queues")(queues.queues)
    app.add_typer(bill.app, name="bill")
    app.add_typer(serve.app, name="serve")
    app.command("agent")(agent.agent)
    app.command("simulate")(simulate.simulate)
    app.add_typer(dev.app, name="dev")


_register()

if __name__ == "__main__":
    app()
