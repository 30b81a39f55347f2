"""``surveil console``: run the console, and manage its users.

    surveil console                                  the console (as ``surveil serve console``)
    surveil console users add NAME --role ROLE       a user; the password is asked twice, or read
                                                     from standard input with --password-stdin
    surveil console users list | remove NAME

Users live in ``CONSOLE_USERS_FILE`` (default ``console-users.json``), mode 0600, argon2 hashes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .users import ROLES, UserError, UserStore


def _store() -> UserStore:
    return UserStore(Path(os.environ.get("CONSOLE_USERS_FILE", "console-users.json")))


@click.group("console", invoke_without_command=True)
@click.pass_context
def console_command(ctx: click.Context) -> None:
    """The surveillance room's web console (docs/console.md); `users` manages who may log in."""
    if ctx.invoked_subcommand is None:
        from .service import main

        main()


@console_command.group("users")
def users_command() -> None:
    """Who may log in to the console, and as what (operator, supervisor, auditor)."""


@users_command.command("add")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice(ROLES),
    required=True,
    help="operator: view, acknowledge, note; supervisor: also assign and close; auditor: read only, export.",
)
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input (one line) instead of asking.")
@click.option("--replace", is_flag=True, help="Set a new password or role for a user that exists.")
def add_user(name: str, role: str, password_stdin: bool, replace: bool) -> None:
    """Add a user (or --replace one)."""
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    store = _store()
    try:
        store.add(name, role, password, replace=replace)
    except UserError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"{name}: {role}, in {store.path}")


@users_command.command("list")
def list_users() -> None:
    """The users and their roles."""
    for user in sorted(_store().users().values(), key=lambda u: u.name):
        click.echo(f"{user.name}\t{user.role}")


@users_command.command("remove")
@click.argument("name")
def remove_user(name: str) -> None:
    """Remove a user: their sessions end at their next request."""
    try:
        _store().remove(name)
    except UserError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"{name}: removed")
