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
# Fewer glibc malloc arenas: image encoding on several threads otherwise leaves freed memory resident.
ENV MALLOC_ARENA_MAX=2
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
USER node
EXPOSE 8080 8081 8082
# node itself, not npm: SIGTERM from `docker stop` reaches the process, which shuts down cleanly.
CMD ["node", "dist/api/main.js"]
