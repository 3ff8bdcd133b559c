"""The Discord front end: events and slash commands translated into engine calls (issue 5)."""
