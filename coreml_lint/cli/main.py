"""The ``coreml-lint`` command line, with the conventions users know from ruff.

Exit codes: 0 clean, 1 findings, 2 usage error / unreadable input / internal error (one
line each, no traceback unless ``--verbose``), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import sys
import traceback

import click

from coreml_lint.cli.check import check_command, fail
from coreml_lint.cli.lower import lower_command
from coreml_lint.cli.migrate import migrate_command
from coreml_lint.cli.verify import verify_command
from coreml_lint.core.errors import InputError
from coreml_lint.core.version import __version__
from coreml_lint.rules import all_rules, rule_by_code


class _DefaultToCheck(click.Group):
    """``coreml-lint PATH`` means ``coreml-lint check PATH``, as ``ruff PATH`` once did."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = ["check", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="coreml-lint")
def main_group() -> None:
    """Find what crashes or silently mislowers in ExecuTorch's Core ML backend."""


@main_group.command("rule")
@click.argument("code")
def rule_command(code: str) -> None:
    """Print a rule's documentation."""
    rule = rule_by_code(code)
    if rule is None:
        fail(f"unknown rule {code!r} (see `coreml-lint rules`)")
    assert rule is not None
    severity = " or ".join(s.value for s in rule.severities())
    click.echo(f"# {rule.code} {rule.name} [{severity}, {rule.outcome.value}]\n")
    click.echo(rule.documentation().strip())
    notes = rule.readme_notes()  # a measured table the README shows too (CML107's targets)
    if notes:
        click.echo(f"\n{notes.strip()}")
    click.echo(f"\nApplies to: {rule.applies_to}")


@main_group.command("rules")
@click.option(
    "--target",
    type=click.Choice(("coreml", "coreai")),
    default="coreml",
    show_default=True,
    help="Core ML's rules (CMLnnn) or Core AI's (CAInnn).",
)
def rules_command(target: str) -> None:
    """List every rule."""
    for rule in all_rules(target):
        severity = " or ".join(s.value for s in rule.severities())
        click.echo(f"{rule.code}  {rule.name:28} [{severity}] {rule.summary}")


def main(argv: list[str] | None = None) -> int:
    try:
        main_group.main(args=argv, prog_name="coreml-lint", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        click.echo("error: interrupted", err=True)
        return 130  # the shell's convention for SIGINT
    except click.ClickException as exc:
        exc.show()
        return 2
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    except InputError as exc:  # the user's input or output path, in one line
        click.echo(f"error: {exc}", err=True)
        return 2
    except Exception as exc:  # never a traceback for users; --verbose shows it
        if "-v" in (argv or sys.argv) or "--verbose" in (argv or sys.argv):
            traceback.print_exc()
        click.echo(f"error: internal error: {type(exc).__name__}: {exc}", err=True)
        return 2
    return 0


main_group.add_command(check_command)
main_group.add_command(lower_command)
main_group.add_command(verify_command)
main_group.add_command(migrate_command)
