# One image for every process of the service; docker-compose.yml picks the command.

# Build stage: every dependency (the compiler included), then `npm run build` into dist/: our code as
# JavaScript and the workflow bundle, made once here instead of at every worker start.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# Runtime stage: production dependencies and dist/ only; no TypeScript, no tsx, no sources.
FROM node:24-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
# jemalloc for every process (src/dev/native-allocator.ts): glibc's malloc keeps the memory freed
# after bursts of image work and the Temporal core's resident (bench:idle, docs/capacity.md, "Worker
# memory at rest"). The link gives it one path on any architecture.
RUN apt-get update \
  && apt-get install -y --no-install-recommends libjemalloc2 \
  && rm -rf /var/lib/apt/lists/* \
  && ln -s "/usr/lib/$(uname -m)-linux-gnu/libjemalloc.so.2" /usr/local/lib/libjemalloc.so.2
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2
# Freed pages back to the system within a second, by a background thread, from two arenas
# (jemallocOptions in src/dev/native-allocator.ts says why).
ENV MALLOC_CONF=background_thread:true,dirty_decay_ms:1000,narenas:2
# Were jemalloc absent, fewer glibc malloc arenas.
ENV MALLOC_ARENA_MAX=2
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
USER node
EXPOSE 8080 8081 8082
# node itself, not npm: SIGTERM from `docker stop` reaches the process, which shuts down cleanly.
CMD ["node", "dist/api/main.js"]
