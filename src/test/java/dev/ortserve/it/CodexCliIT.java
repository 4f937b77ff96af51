package dev.ortserve.it;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Codex CLI ({@code @openai/codex}, pinned, installed from npm into target/codex) runs one
 * non-interactive turn ({@code codex exec}) against the packaged server, over HTTP and over
 * WebSocket ({@code supports_websockets}, with its {@code generate: false} warm-up). The served
 * model is the generated {@code agent} model, whose 128k vocabulary and 64k context hold Codex's prompt
 * (instructions, function and namespace tools, client_metadata, encrypted reasoning requested).
 * Its text is random, so it calls no tool: the turn must complete and Codex exit 0.
 */
class CodexCliIT {

    static final String CODEX_VERSION = "0.169.0";
    static final Path TOOLS = Path.of("target", "codex").toAbsolutePath();

    static PackagedApp app;
    static Path codex;

    @BeforeAll
    static void start() throws Exception {
        app = PackagedApp.startAgentModel("codex", Map.of("ORTSERVE_COMPACTION_KEY", "codex-it-key"));
        codex = install();
    }

    @AfterAll
    static void stop() {
        if (app != null) app.close();
    }

    /** npm install --prefix target/codex @openai/codex@VERSION (once), and the native binary it brings. */
    static Path install() throws Exception {
        Optional<Path> found = binary();
        if (found.isEmpty()) {
            Files.createDirectories(TOOLS);
            Process npm = new ProcessBuilder("npm", "install", "--prefix", TOOLS.toString(), "--no-audit", "--no-fund", "--loglevel=error",
                    "@openai/codex@" + CODEX_VERSION).redirectErrorStream(true).redirectOutput(TOOLS.resolve("npm-install.log").toFile()).start();
            assertTrue(npm.waitFor(10, TimeUnit.MINUTES), "npm install of @openai/codex took over 10 minutes");
            assertEquals(0, npm.exitValue(), "npm install @openai/codex@" + CODEX_VERSION + " failed (npm on PATH? .ci/run installs it):\n"
                    + Files.readString(TOOLS.resolve("npm-install.log")));
            found = binary();
        }
        return found.orElseThrow(() -> new IllegalStateException("no codex binary under " + TOOLS));
    }

    private static Optional<Path> binary() throws IOException {
        Path vendor = TOOLS.resolve("node_modules/@openai/codex-linux-x64/vendor");
        if (!Files.isDirectory(vendor)) return Optional.empty();
        try (Stream<Path> files = Files.walk(vendor)) {
            return files.filter(p -> p.getFileName().toString().equals("codex") && p.getParent().getFileName().toString().equals("bin")
                    && Files.isExecutable(p)).findFirst();
        }
    }

    @Test
    void codexExecCompletesOverHttp() throws Exception {
        Result r = exec("http", false);
        assertEquals(0, r.exit, r.describe());
        assertTrue(r.stdout.contains("\"type\":\"turn.completed\""), r.describe());
        assertTrue(app.log().contains("agent"), app.log());
        // the same run's server log has its access lines (issue 25: one INFO line per request, tokens included)
        assertAccessLine("POST /v1/responses 200 ");
    }

    @Test
    void codexExecCompletesOverWebSocket() throws Exception {
        Result r = exec("websocket", true);
        assertEquals(0, r.exit, r.describe());
        assertTrue(r.stdout.contains("\"type\":\"turn.completed\""), r.describe());
        assertTrue(r.stderr.contains("successfully connected to Responses WebSocket"), "Codex used the WebSocket: " + r.describe());
        assertAccessLine("WS /v1/responses 200 ");
    }

    /**
     * The server log has an access line for one of Codex's responses with its model and tokens; waits for it a
     * little (a stream's line is written when the server's end handler runs, which Codex need not wait for).
     */
    private void assertAccessLine(String start) throws InterruptedException {
        java.util.regex.Pattern line = java.util.regex.Pattern.compile(java.util.regex.Pattern.quote(start)
                + "\\d+ms request_id=\\S+ model=agent prompt_tokens=[1-9]\\d* completion_tokens=\\d+");
        for (int i = 0; i < 100 && !line.matcher(app.log()).find(); i++) Thread.sleep(100);
        assertTrue(line.matcher(app.log()).find(), "no access line '" + start + "...' for Codex's response in the server log:\n" + app.log());
    }

    record Result(int exit, String stdout, String stderr) {
        String describe() {
            return "exit " + exit + "\n--- stdout (tail)\n" + tail(stdout) + "\n--- stderr (tail)\n" + tail(stderr);
        }

        private static String tail(String s) {
            return s.length() <= 6000 ? s : s.substring(s.length() - 6000);
        }
    }

    static Result exec(String name, boolean websocket) throws Exception {
        Path home = Path.of("target", "codex-home-" + name).toAbsolutePath();
        Path work = Path.of("target", "codex-work-" + name).toAbsolutePath();
        Files.createDirectories(home);
        Files.createDirectories(work);
        Files.writeString(home.resolve("config.toml"), """
                model = "agent"
                model_provider = "ortserve"
                check_for_update_on_startup = false
                # hosted tools are refused by this server (400): Codex's own setting removes web_search from its requests
                web_search = "disabled"

                [features]
                plugins = false

                [model_providers.ortserve]
                name = "ortserve"
                base_url = "%s/v1"
                wire_api = "responses"
                env_key = "ORTSERVE_API_KEY"
                request_max_retries = 0
                stream_max_retries = 0
                supports_websockets = %s
                """.formatted(app.baseUri(), websocket));
        Path out = home.resolve("stdout.jsonl");
        Path err = home.resolve("stderr.log");
        ProcessBuilder builder = new ProcessBuilder(List.of(codex.toString(), "exec", "--json", "--skip-git-repo-check", "say hi"))
                .directory(work.toFile()).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                .redirectOutput(out.toFile()).redirectError(err.toFile());
        builder.environment().put("CODEX_HOME", home.toString());
        builder.environment().put("ORTSERVE_API_KEY", "not-checked");
        builder.environment().put("RUST_LOG", "codex_api=info");
        Process process = builder.start();
        if (!process.waitFor(8, TimeUnit.MINUTES)) {
            process.destroyForcibly();
            return new Result(-1, Files.readString(out), Files.readString(err) + "\n(killed after 8 minutes)\n--- server log\n" + app.log());
        }
        return new Result(process.exitValue(), Files.readString(out), Files.readString(err));
    }
}
