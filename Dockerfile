# The replyonce app image: one image, three processes (api, worker, desk), chosen by the command.
FROM node:24.22.3-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY api ./api
COPY contract ./contract
COPY desk ./desk
COPY review ./review
COPY intake ./intake
COPY activities ./activities
COPY workflows ./workflows
COPY worker ./worker
COPY lib ./lib
COPY sandbox ./sandbox
COPY scripts ./scripts
RUN npm run build

FROM node:24.22.3-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# tsx is a runtime dependency: the operator commands run from source.
RUN npm ci --omit=dev --no-audit --no-fund
COPY --from=build /app/dist ./dist
# The sources too: the operator commands (db:migrate, temporal:setup, replay) run them with tsx.
COPY tsconfig.json ./
COPY db ./db
COPY api ./api
COPY contract ./contract
COPY desk ./desk
COPY review ./review
COPY intake ./intake
COPY activities ./activities
COPY workflows ./workflows
COPY worker ./worker
COPY lib ./lib
COPY scripts ./scripts
USER node
# The API listens on PORT; the worker serves /metrics on METRICS_PORT.
EXPOSE 3000 9464
CMD ["node", "dist/api/main.js"]
