"""The engine's services, one idea each; bot/engine.py builds them once, and front ends call them directly."""
