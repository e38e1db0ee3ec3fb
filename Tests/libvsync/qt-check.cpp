/*
 * qt-check: the Qt adapter (include/vsync/vsync-qt.h) against a real vsyncd, headless
 * (QT_QPA_PLATFORM=offscreen), run by LibvsyncQtTests, which compares what it prints with the
 * ticks vsyncd sent.
 *
 *   qt-check animate SOCKET FRAMES WINDOW
 *     A Qt Quick scene with a QML NumberAnimation and a QVariantAnimation, driven by the
 *     installed driver. Each frame prints the frame, the driver's clock and both animations'
 *     times. After FRAMES frames both stop, so Qt stops the driver; once the loop has settled
 *     (the pause answered, everything sent before it read) a second client counts WINDOW
 *     vblanks on its own thread and reads the GUI thread's voluntary context switches
 *     (/proc/self/task/TID/status) at both ends: its wake-ups.
 *
 *   qt-check follow SOCKET FRAMES SCREEN...
 *     A window shown on the first SCREEN (a QScreen name of the offscreen platform's config)
 *     with an animation running; every FRAMES frames it moves to the next SCREEN. Each frame
 *     prints the driver's selector and the frame's display and interval.
 *
 *   qt-check late SOCKET
 *     install() after a QQuickWindow exists: what it returns and why.
 */
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>

#include <QtCore/QVariantAnimation>
#include <QtGui/QGuiApplication>
#include <QtGui/QScreen>
#include <QtQml/QQmlComponent>
#include <QtQml/QQmlEngine>
#include <QtQuick/QQuickItem>
#include <QtQuick/QQuickView>

#include <vsync/vsync-qt.h>

static const char *scene = R"(
import QtQuick
Item {
    id: root
    width: 64; height: 64
    property bool go: false
    property real t: 0
    NumberAnimation on t { from: 0; to: 1000000; duration: 1000000; running: root.go }
}
)";

static long task_field(int tid, const char *name, char *text, size_t text_size) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
    FILE *f = fopen(path, "r");
    long value = -1;
    if (f == nullptr) return -1;
    size_t len = strlen(name);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, name, len) == 0 && line[len] == ':') {
            const char *v = line + len + 1;
            while (*v == ' ' || *v == '\t') v++;
            if (text != nullptr) snprintf(text, text_size, "%s", v);
            value = strtol(v, nullptr, 10);
            break;
        }
    }
    fclose(f);
    return value;
}

static void print_frame(const vsync::AnimationDriver &driver, const vsync_frame &f, const char *extra) {
    printf("frame seq=%" PRIu64 " ts=%" PRIu64 " duration=%" PRIu64 " skipped=%u display=%u flags=%u elapsed=%lld selector=%s %s\n",
           f.sequence, f.timestamp_ns, f.duration_ns, f.skipped, f.display_id, f.flags, (long long)driver.elapsed(),
           driver.displaySelector().constData(), extra);
    fflush(stdout);
}

/* The window of the idle check: WINDOW vblanks of a second client, opened at the first vblank
 * that finds the GUI thread settled and asleep, and at least 3 vblanks after the settle: Qt
 * Quick renders the last animated frame on a 5 ms update timer (the offscreen platform's
 * requestUpdate), armed before the settle, which has fired by then or left the thread runnable. */
struct IdleWatch {
    const char *socket;
    long window;
    int gui_tid;
    std::atomic<bool> settled{false};
    std::atomic<bool> failed{false};

    static void on_frame(vsync_link *, const vsync_frame *f, void *user) { *static_cast<uint64_t *>(user) = f->sequence; }

    void run() {
        vsync_client *client;
        vsync_link *link;
        uint64_t sequence = 0;
        if (vsync_client_connect(socket, &client) < 0 || vsync_link_create(client, "primary", on_frame, &sequence, &link) < 0) {
            printf("FAIL idle client: %s\n", vsync_client_last_error(nullptr));
            failed = true;
            QMetaObject::invokeMethod(qApp, &QCoreApplication::quit, Qt::QueuedConnection);
            return;
        }
        long start = -1, switches = 0, settled_at = -1;
        char text[64] = "";
        for (;;) {
            if (vsync_client_dispatch(client, -1) <= 0) continue;
            if (start < 0) {
                if (!settled) continue;
                if (settled_at < 0) settled_at = (long)sequence;
                if ((long)sequence - settled_at < 3) continue;
                task_field(gui_tid, "State", text, sizeof text);
                if (text[0] != 'S') continue;
                switches = task_field(gui_tid, "voluntary_ctxt_switches", nullptr, 0);
                start = (long)sequence;
            } else if ((long)sequence - start >= window) {
                long end = task_field(gui_tid, "voluntary_ctxt_switches", nullptr, 0);
                task_field(gui_tid, "State", text, sizeof text);
                printf("idle window=%ld vblanks switches=%ld state=%c\n", (long)sequence - start, end - switches, text[0]);
                fflush(stdout);
                break;
            }
        }
        vsync_link_destroy(link);
        vsync_client_destroy(client);
        QMetaObject::invokeMethod(qApp, &QCoreApplication::quit, Qt::QueuedConnection);
    }
};

static int animate(int argc, char **argv) {
    QGuiApplication app(argc, argv);
    const char *socket = argv[2];
    const long frames = atol(argv[3]);
    IdleWatch watch{socket, atol(argv[4]), (int)gettid()};

    vsync::AnimationDriver driver(nullptr, socket);
    if (!driver.install()) {
        printf("FAIL install: %s\n", qPrintable(driver.errorString()));
        return 1;
    }
    // The window exists after the driver is installed, as the header asks; it then follows it.
    QQuickView view;
    QQmlComponent component(view.engine());
    component.setData(scene, QUrl());
    auto *root = qobject_cast<QQuickItem *>(component.create());
    if (root == nullptr) {
        printf("FAIL qml: %s\n", qPrintable(component.errorString()));
        return 1;
    }
    root->setParentItem(view.contentItem());
    view.resize(64, 64);
    view.show();
    driver.setWindow(&view);
    printf("screen=%s refresh=%.3f selector=%s\n", qPrintable(view.screen()->name()), view.screen()->refreshRate(),
           driver.displaySelector().constData());

    QVariantAnimation animation;
    animation.setStartValue(0.0);
    animation.setEndValue(1000000.0);
    animation.setDuration(1000000);
    long seen = 0;
    driver.setFrameCallback([&](const vsync_frame &f) {
        if (seen >= frames) {
            print_frame(driver, f, "after-stop");
            return;
        }
        char extra[96];
        snprintf(extra, sizeof extra, "anim=%d qml=%.3f", animation.currentTime(), root->property("t").toDouble());
        print_frame(driver, f, extra);
        if (++seen == frames) {
            animation.stop();
            root->setProperty("go", false);
        }
    });
    // Qt stops the driver once no animation runs; the settle then makes sure nothing vsyncd sent
    // before the pause is still unread: the display list is answered after the pause took effect.
    QObject::connect(&driver, &QAnimationDriver::stopped, &app, [&] {
        QMetaObject::invokeMethod(&app, [&] {
            if (watch.settled) return;
            int n = vsync_client_get_displays(driver.client(), nullptr, 0, sizeof(vsync_display));
            int drained = vsync_client_dispatch(driver.client(), 0);
            printf("stopped; settled displays=%d drained=%d\n", n, drained);
            fflush(stdout);
            watch.settled = true;
        }, Qt::QueuedConnection);
    });
    animation.start();
    root->setProperty("go", true);
    std::thread idle(&IdleWatch::run, &watch);
    int status = app.exec();
    idle.join();
    printf("frames=%ld running=%d\n", seen, driver.isRunning());
    const int code = watch.failed ? 1 : status;
    // Qt 6.4's software threaded render loop can deadlock destroying its window (the GUI thread
    // in QThread::wait, the render thread in its wait condition; seen on a loaded machine). All
    // is printed by now, so that loop's run leaves without Qt's teardown; the basic loop's runs it.
    if (qgetenv("QSG_RENDER_LOOP") == "threaded") {
        fflush(stdout);
        _exit(code);
    }
    return code;
}

static int follow(int argc, char **argv) {
    QGuiApplication app(argc, argv);
    const char *socket = argv[2];
    const long frames = atol(argv[3]);
    QList<QScreen *> path;
    for (int i = 4; i < argc; i++) {
        QScreen *found = nullptr;
        for (QScreen *s : QGuiApplication::screens())
            if (s->name() == QString::fromUtf8(argv[i])) found = s;
        if (found == nullptr) {
            printf("FAIL no screen %s\n", argv[i]);
            return 1;
        }
        path.append(found);
    }
    vsync::AnimationDriver driver(nullptr, socket);
    if (!driver.install()) {
        printf("FAIL install: %s\n", qPrintable(driver.errorString()));
        return 1;
    }
    QWindow window;
    window.setScreen(path.first());
    window.setGeometry(QRect(path.first()->geometry().topLeft() + QPoint(10, 10), QSize(64, 64)));
    window.show();
    driver.setWindow(&window);

    QVariantAnimation animation;
    animation.setStartValue(0.0);
    animation.setEndValue(1000000.0);
    animation.setDuration(1000000);
    long seen = 0;
    int leg = 0;
    driver.setFrameCallback([&](const vsync_frame &f) {
        char extra[96];
        snprintf(extra, sizeof extra, "screen=%s anim=%d", qPrintable(window.screen()->name()), animation.currentTime());
        print_frame(driver, f, extra);
        if (++seen < frames) return;
        seen = 0;
        if (++leg == path.size()) {
            animation.stop();
            app.quit();
            return;
        }
        // Moved the way a user drags it: its geometry now lies on the next screen.
        window.setGeometry(QRect(path[leg]->geometry().topLeft() + QPoint(10, 10), QSize(64, 64)));
        printf("moved to %s: window on %s, selector %s\n", qPrintable(path[leg]->name()), qPrintable(window.screen()->name()),
               driver.displaySelector().constData());
        fflush(stdout);
    });
    animation.start();
    return app.exec();
}

/* The order the header asks for, broken: a QQuickWindow first, then install(). */
static int late(int argc, char **argv) {
    QGuiApplication app(argc, argv);
    QQuickView view;
    vsync::AnimationDriver driver(&view, argv[2]);
    const bool installed = driver.install();
    printf("install after a QQuickWindow: %s (%s)\n", installed ? "true" : "false", qPrintable(driver.errorString()));
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 5 && !strcmp(argv[1], "animate")) return animate(argc, argv);
    if (argc >= 5 && !strcmp(argv[1], "follow")) return follow(argc, argv);
    if (argc >= 3 && !strcmp(argv[1], "late")) return late(argc, argv);
    fprintf(stderr, "usage: qt-check animate SOCKET FRAMES WINDOW | follow SOCKET FRAMES SCREEN... | late SOCKET\n");
    return 64;
}
