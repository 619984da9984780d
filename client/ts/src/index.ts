// A TypeScript client of the dropstream API. The types come from the
// server's /openapi.json (src/schema.d.ts, made by `npm run generate`);
// calls go through openapi-fetch, so a path, its parameters, its body and
// each answer's shape are checked by the compiler.
import createFetchClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths } from "./schema.js";

/** The error envelope every 4xx and 5xx answer carries. */
export type ApiError = components["schemas"]["Error"];

/** Where the API is and how to call it. */
export interface ClientOptions {
  /** The server's address, for example "http://127.0.0.1:8080". */
  baseUrl: string;
  /** An API key, sent as "Authorization: Bearer <key>". Optional on an open server. */
  apiKey?: string;
  /** The fetch to use; the global one by default. */
  fetch?: typeof globalThis.fetch;
}

/** The typed client: GET, POST, PUT, PATCH and DELETE over the document's paths. */
export type DropstreamClient = Client<paths>;

/** createClient returns a client of the API at options.baseUrl. */
export function createClient(options: ClientOptions): DropstreamClient {
  const client = createFetchClient<paths>({ baseUrl: options.baseUrl, fetch: options.fetch });
  const key = options.apiKey;
  if (key) {
    client.use({
      onRequest({ request }) {
        request.headers.set("Authorization", `Bearer ${key}`);
        return request;
      },
    });
  }
  return client;
}
