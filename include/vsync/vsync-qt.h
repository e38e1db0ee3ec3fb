/*
 * vsync-qt.h: Qt's animations (Qt Quick's and QAbstractAnimation's) driven by vsyncd's frames
 * of the display a window is on, instead of Qt's own timer.
 *
 *   QGuiApplication app(argc, argv);
 *   vsync::AnimationDriver driver;              // connects to vsyncd
 *   if (!driver.install())                      // before the first QQuickWindow exists
 *       qWarning("%s", qPrintable(driver.errorString()));   // Qt's own timer keeps animating
 *   QQuickView view;                            // or any QWindow
 *   driver.setWindow(&view);                    // its display, and the next one if it moves
 *
 * Header-only, so libvsync itself gains no dependency on Qt (-fPIC: Qt 6 wants position
 * independent code, which its CMake support adds and its .pc files do not):
 *   c++ -std=c++17 -fPIC app.cpp $(pkg-config --cflags --libs vsync-qt Qt6Quick)
 *
 * Where Qt has no frame clock of its own it steps animations with a timer near 60 Hz and
 * assumes every frame lasts the same. This driver advances them once per vblank of the window's
 * display, by the time between the vblanks' kernel timestamps: on a 144 Hz display an animation
 * moves every 6.9 ms, and a missed frame moves it twice as far. Qt counts animation time in whole
 * milliseconds; elapsed() is measured from the driver's start, so the truncation never adds up.
 *
 * The display: the vsyncd display whose connector name is the window's QScreen::name() (as
 * Wayland compositors and eglfs name screens: "HDMI-A-1", "DP-1"), or whose X11 RandR output
 * name it is (the X drivers' names for HDMI-A-1: "HDMI-1", "HDMI1", or "HDMI-A-0" from amdgpu
 * and radeon), else vsyncd's primary display; it follows QWindow::screenChanged. While Qt runs
 * no animation the link is paused, so the fd stays silent and the event loop sleeps. The driver
 * and its window belong to one thread (Qt's animation drivers are per thread): the one that
 * created and installed it.
 */
#ifndef VSYNC_VSYNC_QT_H
#define VSYNC_VSYNC_QT_H

#ifndef __cplusplus
#error "vsync-qt.h is C++ (Qt 6); C programs include vsync/vsync.h"
#endif

#include <QtCore/QAbstractAnimation>
#include <QtCore/QByteArray>
#include <QtCore/QPointer>
#include <QtCore/QSocketNotifier>
#include <QtCore/QString>
#include <QtGui/QGuiApplication>
#include <QtGui/QScreen>
#include <QtGui/QWindow>

#include <algorithm>
#include <cstring>
#include <functional>

#include <vsync/vsync.h>

namespace vsync {

class AnimationDriver : public QAnimationDriver {
public:
    /* Connects to vsyncd at socketPath (nullptr: $VSYNCD_SOCKET, else the system's socket; it
     * waits for the handshake, up to 2 s) and links to window's display (nullptr: the primary).
     * If it cannot connect, isConnected() is false and errorString() says why. */
    explicit AnimationDriver(QWindow *window = nullptr, const char *socketPath = nullptr, QObject *parent = nullptr)
        : QAnimationDriver(parent) {
        if (vsync_client_connect(socketPath, &client_) < 0) {
            error_ = QString::fromUtf8(vsync_client_last_error(nullptr));
            client_ = nullptr;
            return;
        }
        notifier_ = new QSocketNotifier(vsync_client_get_fd(client_), QSocketNotifier::Read, this);
        QObject::connect(notifier_, &QSocketNotifier::activated, this, [this] { dispatch(); });
        setWindow(window);
    }

    ~AnimationDriver() override {
        uninstall(); // here, while stop() and elapsed() are still this class's
        delete notifier_;
        if (link_ != nullptr) vsync_link_destroy(link_);
        if (client_ != nullptr) vsync_client_destroy(client_);
    }

    AnimationDriver(const AnimationDriver &) = delete;
    AnimationDriver &operator=(const AnimationDriver &) = delete;

    /* Makes this the animation driver of the calling thread. Call it before the first
     * QQuickWindow is created: Qt Quick's threaded render loop installs a driver of its own then,
     * and Qt keeps the one installed first. False, with errorString() saying why, without a
     * connection to vsyncd or when Qt kept another driver. */
    bool install() {
        if (client_ == nullptr || installed_) return installed_;
        // Qt refuses a second driver with a warning alone: the only public sign of it.
        refused() = false;
        previousHandler() = qInstallMessageHandler(&AnimationDriver::watchInstall);
        QAnimationDriver::install();
        qInstallMessageHandler(previousHandler());
        if (refused()) {
            error_ = QStringLiteral("Qt already has an animation driver on this thread (a QQuickWindow created before "
                                    "install() brings Qt Quick's): install the vsync driver first");
            return false;
        }
        installed_ = true;
        return true;
    }

    void uninstall() {
        if (!installed_) return;
        QAnimationDriver::uninstall();
        installed_ = false;
    }

    /* Follow window's display from now on (nullptr: vsyncd's primary display). */
    void setWindow(QWindow *window) {
        QObject::disconnect(screenChanged_);
        window_ = window;
        if (window != nullptr)
            screenChanged_ = QObject::connect(window, &QWindow::screenChanged, this,
                                              [this](QScreen *screen) { follow(screen); });
        follow(window != nullptr ? window->screen() : nullptr);
    }

    /* Called after each frame's advance(), with the frame the animations were advanced to. */
    void setFrameCallback(std::function<void(const vsync_frame &)> callback) { frameCallback_ = std::move(callback); }

    /* The animation clock: ms from start() to the last frame's vblank. */
    qint64 elapsed() const override { return elapsedMs_; }

    bool isConnected() const { return client_ != nullptr; }
    QString errorString() const { return error_; }
    /* The selector the link follows: the window's connector name, or "primary". */
    QByteArray displaySelector() const { return selector_; }
    const vsync_frame &lastFrame() const { return frame_; }
    vsync_client *client() const { return client_; }
    vsync_link *link() const { return link_; }

protected:
    /* Qt starts the driver when an animation starts and stops it when none is left. */
    void start() override {
        startNs_ = vsync_now_ns();
        elapsedMs_ = 0;
        if (link_ != nullptr) vsync_link_set_paused(link_, false);
        QAnimationDriver::start();
    }

    void stop() override {
        if (link_ != nullptr) vsync_link_set_paused(link_, true);
        QAnimationDriver::stop();
    }

private:
    static void onFrame(vsync_link *, const vsync_frame *frame, void *user) {
        auto *self = static_cast<AnimationDriver *>(user);
        // A library older than this header fills fewer fields: the rest stay 0.
        std::memset(&self->frame_, 0, sizeof self->frame_);
        std::memcpy(&self->frame_, frame, std::min<size_t>(frame->struct_size, sizeof self->frame_));
        self->newFrame_ = true;
    }

    static bool &refused() {
        static thread_local bool value = false;
        return value;
    }

    static QtMessageHandler &previousHandler() {
        static QtMessageHandler handler = nullptr;
        return handler;
    }

    static void watchInstall(QtMsgType type, const QMessageLogContext &context, const QString &message) {
        if (message.startsWith(QLatin1String("QUnifiedTimer: animation driver already installed"))) {
            refused() = true;
            return;
        }
        previousHandler()(type, context, message);
    }

    static void onError(vsync_link *, int, const char *message, void *user) {
        static_cast<AnimationDriver *>(user)->error_ = QString::fromUtf8(message);
        qWarning("vsync::AnimationDriver: %s", message);
    }

    /* Reads the fd. Animations advance after libvsync's dispatch has returned, so what they run
     * (QML bindings, slots) may call anything, this driver's setWindow included. */
    void dispatch() {
        newFrame_ = false;
        vsync_client_dispatch(client_, 0);
        if (!newFrame_ || !isRunning()) return;
        const uint64_t ts = frame_.timestamp_ns;
        // A vblank from before start() (its tick was sent late, on a busy machine) starts the
        // clock: measured from start(), the next frame would move less than its interval.
        startNs_ = std::min(startNs_, ts);
        const qint64 ms = qint64((ts - startNs_) / 1000000);
        elapsedMs_ = std::max(elapsedMs_, ms);
        advance();
        if (frameCallback_) frameCallback_(frame_);
    }

    /* vsyncd's display named as the screen is, else the one whose X11 name it is (if only one
     * is), else the primary one. */
    QByteArray selectorFor(QScreen *screen) {
        if (screen == nullptr) return QByteArrayLiteral("primary");
        const QByteArray name = screen->name().toUtf8();
        vsync_display displays[VSYNC_MAX_DISPLAYS];
        const int n = std::min(vsync_client_get_displays(client_, displays, VSYNC_MAX_DISPLAYS, sizeof displays[0]),
                               VSYNC_MAX_DISPLAYS);
        const bool fromZero = randROutputsCountFromZero();
        for (int i = 0; i < n && !fromZero; i++)
            if (!name.isEmpty() && name == displays[i].name) return name;
        QByteArray found;
        for (int i = 0; i < n; i++) {
            if (!isRandROutputName(name, displays[i].name, fromZero)) continue;
            if (!found.isEmpty()) return QByteArrayLiteral("primary"); // two candidates: neither is sure
            found = displays[i].name;
        }
        return found.isEmpty() ? QByteArrayLiteral("primary") : found;
    }

    /* The amdgpu and radeon X drivers number each kind of output from 0 ("HDMI-A-0",
     * "DisplayPort-0") where the kernel counts from 1: their names give them away. */
    static bool randROutputsCountFromZero() {
        for (QScreen *s : QGuiApplication::screens()) {
            const QString name = s->name();
            if (name.endsWith(QLatin1String("-0")) || name.startsWith(QLatin1String("DisplayPort-"))) return true;
        }
        return false;
    }

    /* Whether an X server names the kernel's connector `connector` as `output`. X11 screens
     * carry RandR output names, which are not the kernel's: the modesetting driver (Intel,
     * nouveau and most others today) calls HDMI-A-1 "HDMI-1" and Unknown-1 "None-1"; Intel's
     * older driver drops the dashes and the connector's variant ("HDMI1", "DVI1", "DP1");
     * amdgpu's and radeon's ("fromZero") call it "HDMI-A-0", and DP-1 "DisplayPort-0". */
    static bool isRandROutputName(const QByteArray &output, const char *connector, bool fromZero) {
        const QByteArray kernel(connector);
        const qsizetype dash = kernel.lastIndexOf('-');
        if (output.isEmpty() || dash <= 0) return false;
        QByteArray type = kernel.left(dash);
        const QByteArray id = kernel.mid(dash + 1);
        if (fromZero) {
            bool ok = false;
            const int number = id.toInt(&ok);
            if (!ok || number < 1) return false;
            if (type == "DP") type = "DisplayPort";
            return output == type + '-' + QByteArray::number(number - 1);
        }
        if (type == "HDMI-A") type = "HDMI";
        else if (type == "Unknown") type = "None";
        if (output == type + '-' + id) return true;
        if (type.startsWith("DVI-")) type = "DVI";
        if (type.startsWith("HDMI-")) type = "HDMI";
        return output == type + id;
    }

    void follow(QScreen *screen) {
        if (client_ == nullptr) return;
        const QByteArray selector = selectorFor(screen);
        if (link_ != nullptr && selector == selector_) return;
        if (link_ != nullptr) vsync_link_destroy(link_);
        link_ = nullptr;
        selector_ = selector;
        if (vsync_link_create(client_, selector.constData(), &AnimationDriver::onFrame, this, &link_) < 0) {
            error_ = QString::fromUtf8(vsync_client_last_error(client_));
            link_ = nullptr;
            return;
        }
        vsync_link_set_error_callback(link_, &AnimationDriver::onError);
        // Animations keep their pace while the display is off, on predicted vblanks.
        vsync_link_set_predict_while_off(link_, true);
        // The new link's settings go with its request, so a stopped driver's link never ticks.
        vsync_link_set_paused(link_, !isRunning());
    }

    vsync_client *client_ = nullptr;
    vsync_link *link_ = nullptr;
    QSocketNotifier *notifier_ = nullptr;
    QPointer<QWindow> window_;
    QMetaObject::Connection screenChanged_;
    QByteArray selector_;
    QString error_;
    std::function<void(const vsync_frame &)> frameCallback_;
    vsync_frame frame_ = {};
    uint64_t startNs_ = 0;
    qint64 elapsedMs_ = 0;
    bool newFrame_ = false;
    bool installed_ = false;
};

} // namespace vsync

#endif
