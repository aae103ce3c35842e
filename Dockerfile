# The replyonce app image: one image, two processes (api, worker), chosen by the command.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY api ./api
COPY activities ./activities
COPY workflows ./workflows
COPY worker ./worker
COPY lib ./lib
COPY sandbox ./sandbox
COPY scripts ./scripts
RUN npm run build

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# tsx stays: `npm run db:migrate` and `npm run temporal:setup` run from source.
RUN npm ci --omit=dev --no-audit --no-fund
COPY --from=build /app/dist ./dist
COPY db ./db
COPY lib ./lib
COPY scripts ./scripts
COPY workflows ./workflows
COPY tsconfig.json ./
USER node
# The API listens on PORT; the worker serves /metrics on METRICS_PORT.
EXPOSE 3000 9464
CMD ["node", "dist/api/main.js"]
