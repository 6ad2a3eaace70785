"""Every subcommand is a module of stream/commands, and a flag named like an option of
settings.OPTIONS is that option: declared once, with its one help."""

from __future__ import annotations

import argparse

import stream.commands
from stream.cli import COMMANDS, build_parser
from stream.settings import OPTIONS


def subcommands() -> dict[str, argparse.ArgumentParser]:
    return build_parser()._subparsers._group_actions[0].choices


def test_every_subcommand_is_a_module_of_the_commands_package() -> None:
    assert set(subcommands()) == {name for name, _, _ in COMMANDS}
    for _, module, _ in COMMANDS:
        assert module.__name__.startswith(stream.commands.__name__ + ".")


def test_a_flag_named_like_an_option_says_what_the_option_says() -> None:
    options = {option.flag: option for option in OPTIONS}
    for name, parser in subcommands().items():
        for action in parser._actions:
            for flag in action.option_strings:
                if flag in options:
                    assert action.help.startswith(options[flag].help + " ["), (name, flag)
                    assert action.dest == options[flag].name, (name, flag)
