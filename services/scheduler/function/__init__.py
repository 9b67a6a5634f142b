"""Function runtimes: plugin handlers, their guards, nested calls and the ctx services they are given."""
