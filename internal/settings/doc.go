// Package settings is the command line of every rollup subcommand: a flag set whose flags may
// also be set by an environment variable (ROLLUP_ and the flag's name in upper snake case) or
// by a key of a YAML file (--config FILE or ROLLUP_CONFIG, keys named like the flags), with
// one precedence rule: flag > environment > file > default.
//
// The one idea: a setting is named by its flag everywhere — its environment variable, its
// file key, --help and every error about its value ("--listen (from environment variable
// ROLLUP_LISTEN): ..."), which names the source but never echoes the value (it may be a
// secret).
//
// It does not decide what a valid value is beyond the flag's type (the commands and the
// packages they configure do, returning Invalid errors) and does not know any subcommand.
package settings
