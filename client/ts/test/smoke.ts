// smoke calls the live API at argv[2] with the key argv[3] through the
// client and prints one JSON line per call: {op, status, body}. The Go
// test TestTypeScriptClient_callsTheLiveAPI starts the server, runs this
// and checks each answer.
import { createClient } from "../src/index.js";

const [baseUrl, apiKey] = process.argv.slice(2);
const api = createClient({ baseUrl, apiKey });

function report(op: string, status: number, body: unknown): void {
  console.log(JSON.stringify({ op, status, body }));
}

const health = await api.GET("/healthz");
report("GET /healthz", health.response.status, health.data ?? health.error);

const created = await api.POST("/v1/subscribers", {
  body: { name: "ts-client", destinations: [{ kind: "webhook", address: "https://hooks.example.org/ts" }] },
});
report("POST /v1/subscribers", created.response.status, created.data ?? created.error);
const id = created.data?.id ?? "";

const read = await api.GET("/v1/subscribers/{id}", { params: { path: { id } } });
report("GET /v1/subscribers/{id}", read.response.status, read.data ?? read.error);

const page = await api.GET("/v1/subscribers", { params: { query: { limit: 10 } } });
report("GET /v1/subscribers", page.response.status, page.data ?? page.error);

const user = await api.POST("/payment/create_user");
report("POST /payment/create_user", user.response.status, user.data ?? user.error);
const userId = user.data?.user_id ?? "";

const funds = await api.POST("/payment/add_funds/{user_id}/{amount}", { params: { path: { user_id: userId, amount: "250" } } });
report("POST /payment/add_funds/{user_id}/{amount}", funds.response.status, funds.data ?? funds.error);

const found = await api.GET("/payment/find_user/{user_id}", { params: { path: { user_id: userId } } });
report("GET /payment/find_user/{user_id}", found.response.status, found.data ?? found.error);

const missing = await api.GET("/v1/subscribers/{id}", { params: { path: { id: "no-such-subscriber" } } });
report("GET /v1/subscribers/{id} (missing)", missing.response.status, missing.error?.error ?? missing.data);

const removed = await api.DELETE("/v1/subscribers/{id}", { params: { path: { id } } });
report("DELETE /v1/subscribers/{id}", removed.response.status, removed.data ?? removed.error ?? null);
