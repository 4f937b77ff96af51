package dev.ortserve.api;

import dev.ortserve.ApiTest;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;
import org.openqa.selenium.By;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.TakesScreenshot;
import org.openqa.selenium.WebDriver;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.openqa.selenium.support.ui.WebDriverWait;

import java.io.File;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The playground at / in headless Chromium (Debian's chromium and chromium-driver, which .ci/run
 * installs): the model list loads, a typed message streams an answer in, an attached image goes with the next message
 * (refused by this text model, which the page shows), and a screenshot is saved to target/playground.png.
 */
@QuarkusTest
class PlaygroundTest extends ApiTest {

    @TestHTTPResource("/")
    URL page;

    @Test
    void aTypedMessageStreamsAnAnswerIn() throws Exception {
        assertTrue(Files.isExecutable(Path.of("/usr/bin/chromedriver")), "chromium-driver is not installed (apt-get install chromium chromium-driver)");
        ChromeOptions options = new ChromeOptions();
        options.setBinary("/usr/bin/chromium");
        options.addArguments("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,800");
        ChromeDriverService service = new ChromeDriverService.Builder().usingDriverExecutable(new File("/usr/bin/chromedriver")).build();
        WebDriver driver = new ChromeDriver(service, options);
        try {
            driver.get(page.toString());
            WebDriverWait wait = new WebDriverWait(driver, Duration.ofSeconds(30));
            wait.until(d -> !d.findElements(By.cssSelector("#model option")).isEmpty());
            List<String> models = new ArrayList<>();
            driver.findElements(By.cssSelector("#model option")).forEach(o -> models.add(o.getText()));
            assertTrue(models.contains(MODEL), models.toString());
            driver.findElement(By.id("input")).sendKeys("Hello playground");
            driver.findElement(By.id("send")).click();
            WebElement answer = wait.until(d -> d.findElements(By.cssSelector(".msg.assistant[data-done='true']")).stream().findFirst().orElse(null));
            String text = answer.findElement(By.className("content")).getText();
            assertFalse(text.isBlank(), "streamed text arrived");
            assertEquals("Hello playground", driver.findElement(By.cssSelector(".msg.user")).getText());
            String request = driver.findElement(By.id("request")).getText();
            assertTrue(request.contains("\"stream\": true") && request.contains("Hello playground"), request);
            assertTrue(driver.findElement(By.id("response")).getText().contains("chat.completion.chunk"));
            // an image goes with the next message as a data: URL part; this text model refuses it, naming itself, and the page says so
            driver.findElement(By.id("image")).sendKeys(Path.of("src/test/resources/fixtures/images/b_grad_200x120.png").toAbsolutePath().toString());
            driver.findElement(By.id("input")).sendKeys("What is in this image?");
            driver.findElement(By.id("send")).click();
            WebElement refused = wait.until(d -> d.findElements(By.cssSelector(".msg.error")).stream().findFirst().orElse(null));
            assertTrue(refused.getText().contains("'" + MODEL + "' takes text only"), refused.getText());
            assertTrue(driver.findElement(By.cssSelector(".msg.user img")).getAttribute("src").startsWith("data:image/png;base64,"));
            String imageRequest = driver.findElement(By.id("request")).getText();
            assertTrue(imageRequest.contains("\"image_url\"") && imageRequest.contains("data:image/png;base64,"), imageRequest);
            File shot = ((TakesScreenshot) driver).getScreenshotAs(OutputType.FILE);
            Files.copy(shot.toPath(), Path.of("target", "playground.png"), StandardCopyOption.REPLACE_EXISTING);
        } finally {
            driver.quit();
        }
    }
}
