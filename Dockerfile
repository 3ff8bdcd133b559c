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
RUN pip install --no-cache-dir -e .
VOLUME ["/data"]
CMD ["python", "-m", "bot"]
