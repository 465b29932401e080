"""The command line: parsing, the commands, and the exit statuses."""
