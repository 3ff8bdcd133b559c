FROM python:3.11-slim
WORKDIR /app
ENV PYTHONUNBUFFERED=1 STELIS_DATA_DIR=/data
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY memory ./memory
COPY cogs ./cogs
COPY bench ./bench
COPY templates ./templates
COPY config.yaml ./
# The openai extra too: an OpenAI-compatible endpoint (Ollama, vLLM) is one variable away.
# The project's bytecode written at build: the app runs as a user who cannot write it beside the sources, so
# every start would compile them again.
RUN pip install --no-cache-dir -e '.[openai]' \
    && python -m compileall -q bot memory cogs \
    && useradd --create-home --uid 10001 stelis \
    && mkdir -p /data && chown stelis /data
USER stelis
VOLUME ["/data"]
# Healthy while connected to Discord: the bot refreshes a heartbeat file every 30 s.
HEALTHCHECK --interval=30s --timeout=10s --start-period=90s --retries=3 CMD ["python", "-m", "bot", "health"]
# Discord only: without DISCORD_TOKEN it stops with a clear error (the console: `docker compose run --rm stelis
# python -m bot console`).
CMD ["python", "-m", "bot", "discord"]
