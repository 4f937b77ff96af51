package dev.ortserve.it;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Claude Code ({@code @anthropic-ai/claude-code}, pinned, installed from npm into target/claude-code)
 * runs one non-interactive turn ({@code claude -p "say hi"}) against the packaged server's Messages
 * API ({@code ANTHROPIC_BASE_URL}), telemetry, error reporting, update checks and other nonessential
 * traffic off, on the server's default configuration (the demo model pinned, the agent model beside it, loaded on its
 * first request): ANTHROPIC_MODEL (and sonnet, opus) is {@code agent}, ANTHROPIC_SMALL_FAST_MODEL (and haiku) {@code demo}.
 * The turn runs on the generated {@code agent} model: its 128k vocabulary and 64k context hold Claude Code's prompt (~60-80 KB of
 * system prompt and tools, ~23k tokens). Its text is random, so it calls no tool: the turn must end
 * with exit 0 and a successful result, and the server log must show Claude Code's requests answered,
 * none refused (its first request carries deferred tools and {@code thinking.display: omitted}).
 */
class ClaudeCodeIT {

    static final String CLAUDE_CODE_VERSION = "2.1.328";
    static final Path TOOLS = Path.of("target", "claude-code").toAbsolutePath();
    static final ObjectMapper JSON = new ObjectMapper();
    /** The model of Claude Code's background calls (ANTHROPIC_SMALL_FAST_MODEL, haiku): the demo model, pinned by default. */
    static final String SMALL_FAST = "demo";

    static PackagedApp app;
    static Path claude;

    @BeforeAll
    static void start() throws Exception {
        app = PackagedApp.startDefault("claude-code", Map.of());
        claude = install();
    }

    @AfterAll
    static void stop() {
        if (app != null) app.close();
    }

    /** npm install --prefix target/claude-code @anthropic-ai/claude-code@VERSION (once): its native binary comes as an optional dependency. */
    static Path install() throws Exception {
        Path binary = TOOLS.resolve("node_modules/@anthropic-ai/claude-code-linux-x64/claude");
        if (!Files.isExecutable(binary)) {
            Files.createDirectories(TOOLS);
            Process npm = new ProcessBuilder("npm", "install", "--prefix", TOOLS.toString(), "--no-audit", "--no-fund", "--loglevel=error",
                    "@anthropic-ai/claude-code@" + CLAUDE_CODE_VERSION).redirectErrorStream(true)
                    .redirectOutput(TOOLS.resolve("npm-install.log").toFile()).start();
            assertTrue(npm.waitFor(10, TimeUnit.MINUTES), "npm install of @anthropic-ai/claude-code took over 10 minutes");
            assertEquals(0, npm.exitValue(), "npm install @anthropic-ai/claude-code@" + CLAUDE_CODE_VERSION
                    + " failed (npm on PATH? .ci/run installs it):\n" + Files.readString(TOOLS.resolve("npm-install.log")));
        }
        assertTrue(Files.isExecutable(binary), "no claude binary at " + binary);
        return binary;
    }

    @Test
    void claudePrintModeCompletes() throws Exception {
        Path home = Path.of("target", "claude-home").toAbsolutePath();
        Path work = Path.of("target", "claude-work").toAbsolutePath();
        Files.createDirectories(home);
        Files.createDirectories(work);
        Path out = home.resolve("stdout.json");
        Path err = home.resolve("stderr.log");
        ProcessBuilder builder = new ProcessBuilder(List.of(claude.toString(), "-p", "say hi", "--output-format", "json", "--model", "agent"))
                .directory(work.toFile()).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                .redirectOutput(out.toFile()).redirectError(err.toFile());
        Map<String, String> env = builder.environment();
        env.put("HOME", home.toString());
        env.put("CLAUDE_CONFIG_DIR", home.resolve(".claude").toString());
        env.put("ANTHROPIC_BASE_URL", app.baseUri());
        env.put("ANTHROPIC_API_KEY", "not-checked");
        // the turn on one model, the background calls on another: the default configuration serves both
        for (String alias : List.of("ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL")) env.put(alias, "agent");
        for (String alias : List.of("ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL")) env.put(alias, SMALL_FAST);
        env.put("DISABLE_TELEMETRY", "1");
        env.put("DISABLE_AUTOUPDATER", "1");
        env.put("DISABLE_ERROR_REPORTING", "1");
        env.put("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
        Process process = builder.start();
        boolean ended = process.waitFor(8, TimeUnit.MINUTES);
        if (!ended) process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        String stdout = Files.readString(out), stderr = Files.readString(err);
        String describe = "exit " + (ended ? process.exitValue() : "(killed after 8 minutes)") + "\n--- stdout\n" + tail(stdout)
                + "\n--- stderr\n" + tail(stderr) + "\n--- server log\n" + tail(app.log());
        assertTrue(ended, describe);
        assertEquals(0, process.exitValue(), describe);
        JsonNode result = JSON.readTree(stdout);
        assertEquals("result", result.path("type").asText(), describe);
        assertFalse(result.path("is_error").asBoolean(true), describe);
        assertTrue(result.path("usage").path("input_tokens").asInt() + result.path("usage").path("cache_read_input_tokens").asInt() > 0, describe);
        // the server answered Claude Code's Messages requests (the access log's line for each)
        // the turn ran on the agent model, loaded on this first request beside the pinned demo model. (Claude Code 2.1.328's
        // print mode makes no call of the small fast model, with or without CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: none
        // reaches the demo model; one that did would be held to the same no-refusal check below)
        Pattern line = Pattern.compile("POST /v1/messages 200 \\d+ms request_id=\\S+ model=agent prompt_tokens=[1-9]\\d* completion_tokens=\\d+");
        for (int i = 0; i < 100 && !line.matcher(app.log()).find(); i++) Thread.sleep(100);
        assertTrue(line.matcher(app.log()).find(), "no access line for Claude Code's messages in the server log:\n" + app.log());
        assertTrue(app.log().contains("Serving model 'agent'") && app.log().contains("Serving model 'demo'"), "two models in one process:\n" + app.log());
        // taken as sent: Claude Code retries a refused request without the fields it names (defer_loading, thinking.display), so a 400 would pass unseen
        assertFalse(app.log().contains("POST /v1/messages 4"), "a request of Claude Code's was refused:\n" + app.log());
    }

    private static String tail(String s) {
        return s.length() <= 6000 ? s : s.substring(s.length() - 6000);
    }
}
