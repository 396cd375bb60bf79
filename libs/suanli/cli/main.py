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
    from suanli.cli import dev, simulate

    app.add_typer(dev.app, name="dev")
    app.command("simulate")(simulate.simulate)
    from suanli.cli import agent
    app.command("agent")(agent.agent)
    from suanli.cli import serve
    app.add_typer(serve.app, name="serve")
    from suanli.cli import job, nodes, queues
    app.add_typer(job.app, name="job")
    app.command("nodes")(nodes.nodes)
    app.command("queues")(queues.queues)
    from suanli.cli import bill
    app.add_typer(bill.app, name="bill")
    from suanli.cli import up
    app.command("up")(up.up)


_register()

if __name__ == "__main__":
    app()
