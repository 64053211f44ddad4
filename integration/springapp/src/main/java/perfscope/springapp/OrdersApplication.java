package perfscope.springapp;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.web.context.WebServerPortFileWriter;
import org.springframework.scheduling.annotation.EnableScheduling;

/**
 * perfscope's Spring Boot test service. Endpoints:
 *
 *   GET  /api/orders/{id}         an order as JSON (Jackson); a non-numeric id is HTTP 400
 *   GET  /api/orders-logged/{id}  the same, plus one INFO line through logback's file appender
 *   POST /api/orders              echoes the posted order with its total
 *   GET  /truth                   what the in-app ThreadMXBean filter measured (not counted)
 *   GET  /actuator/prometheus     Micrometer's http_server_requests_seconds_count et al.
 *
 * A scheduler thread allocates in the background, as metrics or cache
 * refreshers do, so request threads and background threads differ.
 *
 * The port is chosen by the OS and written to the file named by the system
 * property perfscope.portfile once Tomcat accepts connections.
 */
@SpringBootApplication
@EnableScheduling
public class OrdersApplication {
    public static void main(String[] args) {
        SpringApplication app = new SpringApplication(OrdersApplication.class);
        String portFile = System.getProperty("perfscope.portfile");
        if (portFile != null) {
            app.addListeners(new WebServerPortFileWriter(portFile));
        }
        app.run(args);
    }
}
