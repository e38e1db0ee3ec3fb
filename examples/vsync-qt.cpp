/*
 * vsync-qt: a Qt Quick scene whose animation runs on vsyncd's frames of the window's display.
 *
 *   c++ -std=c++17 -fPIC vsync-qt.cpp $(pkg-config --cflags --libs vsync-qt Qt6Quick) -o vsync-qt
 *   ./vsync-qt [--frames N] [--socket PATH]     (headless: QT_QPA_PLATFORM=offscreen)
 *
 * With --frames it prints each frame's vblank and the rotation it animated to, and quits.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <QtGui/QGuiApplication>
#include <QtQml/QQmlComponent>
#include <QtQuick/QQuickItem>
#include <QtQuick/QQuickView>

#include <vsync/vsync-qt.h>

static const char *scene = R"(
import QtQuick
Rectangle {
    width: 200; height: 200; color: "black"
    Rectangle {
        objectName: "spinner"; anchors.centerIn: parent; width: 100; height: 100; color: "orange"
        RotationAnimation on rotation { from: 0; to: 360; duration: 2000; loops: Animation.Infinite }
    }
}
)";

int main(int argc, char **argv) {
    QGuiApplication app(argc, argv);
    long frames = 0, seen = 0;
    const char *socket = nullptr;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--frames")) frames = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--socket")) socket = argv[i + 1];
    }

    // Installed before the first Qt Quick window, so Qt Quick's render loop keeps this driver.
    vsync::AnimationDriver driver(nullptr, socket);
    if (!driver.install()) fprintf(stderr, "vsync-qt: %s; animating on Qt's timer\n", qPrintable(driver.errorString()));

    QQuickView view;
    QQmlComponent component(view.engine());
    component.setData(scene, QUrl());
    auto *root = qobject_cast<QQuickItem *>(component.create());
    if (root == nullptr) {
        fprintf(stderr, "vsync-qt: %s\n", qPrintable(component.errorString()));
        return 1;
    }
    root->setParentItem(view.contentItem());
    view.resize(200, 200);
    view.show();
    driver.setWindow(&view); // the display the view is on, and the next one if it moves

    auto *spinner = root->findChild<QQuickItem *>("spinner");
    driver.setFrameCallback([&](const vsync_frame &f) {
        if (frames == 0) return;
        printf("vblank %llu at %.6f s on %s: rotation %.2f\n", (unsigned long long)f.sequence, f.timestamp_ns / 1e9,
               driver.displaySelector().constData(), spinner->rotation());
        if (++seen == frames) app.quit();
    });
    return app.exec();
}
