"""The engine's services, one idea each; bot/engine.py composes them into the facade front ends call."""
