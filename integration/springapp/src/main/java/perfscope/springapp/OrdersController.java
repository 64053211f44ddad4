package perfscope.springapp;

import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

@RestController
public class OrdersController {
    private static final Logger LOG = LoggerFactory.getLogger(OrdersController.class);

    public record Item(String sku, int quantity, long priceCents) {}

    public record Order(long id, String customer, String status, List<Item> items, long totalCents) {}

    static Order order(long id) {
        List<Item> items = new ArrayList<>();
        long total = 0;
        for (int i = 0; i < 5; i++) {
            Item it = new Item("SKU-" + (id * 7 + i), i + 1, 199L * (i + 1));
            items.add(it);
            total += it.quantity() * it.priceCents();
        }
        return new Order(id, "customer-" + (id % 1000), "SHIPPED", items, total);
    }

    @GetMapping("/api/orders/{id}")
    public Order get(@PathVariable long id) {
        return order(id);
    }

    @GetMapping("/api/orders-logged/{id}")
    public Order getLogged(@PathVariable long id) {
        Order o = order(id);
        LOG.info("served order {} to {} with {} items, total {} cents", o.id(), o.customer(), o.items().size(), o.totalCents());
        return o;
    }

    @PostMapping("/api/orders")
    public Order create(@RequestBody Order in) {
        long total = 0;
        for (Item it : in.items()) {
            total += it.quantity() * it.priceCents();
        }
        return new Order(in.id(), in.customer(), "CREATED", in.items(), total);
    }
}
