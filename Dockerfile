# One image for every process of the service; docker-compose.yml picks the command.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
# Fewer glibc malloc arenas: image encoding on several threads otherwise leaves freed memory resident.
ENV MALLOC_ARENA_MAX=2
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
USER node
EXPOSE 8080 8081
CMD ["npm", "run", "api"]
